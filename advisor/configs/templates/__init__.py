"""Fragments the emitter assembles into scripts and notes (package data, never imported)."""
