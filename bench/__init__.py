"""gpuradar's benchmark: `python -m bench` (quick) or `python -m bench --full`."""
