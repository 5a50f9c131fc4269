"""The pipeline: fetch wolfSSL, configure/build each variant per target, load, collect."""
