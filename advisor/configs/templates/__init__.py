"""Fragments the emitter assembles into scripts and notes (package data, never imported), and
planner.py: the GEMM planner, a whole module that advisor imports (configs/knobs.py) and
the GEMM scripts inline as it is."""
