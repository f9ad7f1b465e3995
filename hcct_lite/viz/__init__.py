"""Figures and widgets: the partition, the bound, and the experiments' charts."""
