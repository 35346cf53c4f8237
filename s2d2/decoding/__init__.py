"""The decoder: block loop, draft / route / verify steps, acceptance and the D2F pipeline (read decoder.py first)."""
