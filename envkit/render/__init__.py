"""Rendering: a spec or a colleague's file plus a Selection -> environment.yml text.

Owns: the EnvFile model and its checks (envfile), named specs (specs), mirror profiles (mirrors),
building from a spec (build) and adapting a real file to this machine (adapt).
Pure: computes text from data; never runs a process, detects or solves.
May import: compat/, prefix/ (name checks) and the ground floor (not proc).
"""
