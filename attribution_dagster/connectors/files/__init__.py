"""Local log files: a case's logs/ and node log trees on shared storage."""
