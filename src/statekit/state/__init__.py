"""The state layer: modules, their plans, and the walks that dump and load their state (internal)."""
