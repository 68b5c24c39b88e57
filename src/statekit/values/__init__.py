"""The value layer: JSON data, value fields and records, their hooks, checks, copiers and codecs (internal)."""
