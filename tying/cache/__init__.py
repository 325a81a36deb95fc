"""The cache: its schema (defined once), atomic storage, the summary data, the paper's reference figures, synthetic fixtures."""
