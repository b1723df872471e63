"""Renderers: turn an Analysis and its findings into text. They compute nothing new."""
