"""Check: the CI gate on seam payloads (baseline, check, diff, budgets). Never imports torch."""
