"""Renderers: each reads the model (`flowmap.model`) and writes one format."""
