"""One spider per provider; each yields PriceItem and nothing else."""
