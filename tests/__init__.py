"""The test suite; its folders mirror the code (lib, app, serve, browser, benchmarks) and support/ holds the shared helpers."""
