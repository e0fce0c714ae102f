"""Quality and speed benchmarks (run each as ``python -m benchmarks.<name>``)."""
