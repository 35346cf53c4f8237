"""End-to-end tests in Chromium (Playwright)."""
