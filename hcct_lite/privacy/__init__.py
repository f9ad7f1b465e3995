"""What a silo can do about what its replies give away: DP-SGD at the silo (Opacus)."""

from .dp_sgd import DPSettings, dp_settings, private_train

__all__ = ["DPSettings", "dp_settings", "private_train"]
