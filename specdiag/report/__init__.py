"""Renderers: one function per output format, each from a Report to text. Renderers never parse logs."""
