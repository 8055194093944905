"""How the chat's long content is drawn to lines: a reply's Markdown blocks (markdown_blocks.py), the document
that keeps them and their lines (reply_document.py), and containers whose lines are all alike (rows.py)."""
