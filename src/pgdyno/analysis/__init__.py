"""Analysis: statistics computed from raw files; no rendering here."""
