# Adapted for flowmap's tests: only the GSM8K loader (upstream, unchanged) is needed; its data
# files are written by make_tiny.py in the GSM8K format, nothing is downloaded.
from .gsm8k_loader import GSM8KDataset

MathExprDataset = None
