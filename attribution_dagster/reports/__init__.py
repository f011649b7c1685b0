"""Weekly report, text and Markdown rendering, case export."""
