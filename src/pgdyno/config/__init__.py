"""Hardware profiles and the configuration engine (detect, tune, named configs for benches)."""

from pgdyno.config.hardware import BlockDevice, HardwareProfile, Volume
from pgdyno.config.model import ConfigPlan, Setting, SizingLine, TuneInputs
from pgdyno.config.profiles import load_hardware
from pgdyno.config.resolve import ResolvedConfig, resolve_config

__all__ = ["BlockDevice", "ConfigPlan", "HardwareProfile", "ResolvedConfig", "Setting",
           "SizingLine", "TuneInputs", "Volume", "load_hardware", "resolve_config"]
