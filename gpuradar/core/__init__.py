"""The lowest layer: the offer record, the accelerator catalog, currency, units, configuration
and logging. It imports nothing else of gpuradar."""
