"""What is on disk in an environment and who may touch it.

Owns: the locations of envs (locations), which of them envkit made and may delete (ownership),
the staging/swap/sweep of a target (staging), conda-meta/history (history), conda's
environments.txt and .condarc (condarc), the one reader and writer of conda-meta/*.json,
conda-meta/state and .envkit/*.json (records), and the list/remove inventory (inventory).
May import: the ground floor only (errors, models, config, proc, fsutil, safeio, secrets, resources).
"""
