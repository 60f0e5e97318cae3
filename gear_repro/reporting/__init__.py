"""Paper-layout tables (CSV, Markdown, LaTeX) and figures from run directories."""
