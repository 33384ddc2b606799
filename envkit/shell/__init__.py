"""Using an env: activate/deactivate code for bash, zsh, fish and sh (activate), a subshell inside it
(subshell), its Jupyter kernel (kernel) and one command run inside it (run).
May import: prefix/ and the ground floor.
"""
