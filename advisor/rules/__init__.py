"""Rule engine: YAML rules (symptom matrix) evaluated over metric tables."""
