"""gpuradar: GPU cloud price and availability tracker."""

__version__ = "0.1.0"
