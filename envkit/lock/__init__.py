"""Sharing what was solved: the rattler-lock v6/v7 format (file), `envkit lock` (solve) and offline
bundles (bundle).
May import: file.py only the ground floor (engines and export read and write locks through it);
solve and bundle also plan, create, export, engines, render, prefix.
"""
