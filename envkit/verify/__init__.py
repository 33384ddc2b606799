"""verify: run the bundled AMP smoke test with a target environment's own python."""
