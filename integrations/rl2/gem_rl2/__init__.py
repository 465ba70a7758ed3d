"""GEM environments and ReBN in RL2 (placeholder while the adapter is written)."""
