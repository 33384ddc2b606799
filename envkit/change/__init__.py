"""Day two: `envkit install`, `uninstall` and `update` on an env that already exists.

Owns: the change plan (the env's requested specs from conda-meta/history plus or minus the new ones,
re-solved from the channels and mirror the env was made with), its diff (added / changed / removed,
download size), the torch guard (diff.py), and applying it atomically: the env is hard-linked into a
staging folder beside it, changed there, and swapped in with the same set-aside / rename machinery a
`create --force` uses (apply.py), so a failure, Ctrl-C or kill leaves the env exactly as it was.
May import: create.py and everything below it (floor 6).
"""
