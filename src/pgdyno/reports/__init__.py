"""Reports: plots and Markdown/HTML renderings of summaries computed elsewhere."""
