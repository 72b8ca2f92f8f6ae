"""What the served app adds around the page (``app.ui``, started by ``app.serve``): the documented
API as MCP tools (``mcp_tools``) and the sign-in on their endpoint (``mcp_auth``), the bound on
Gradio's per-session bookkeeping (``sessions``) and the bound on the rendered pages kept on disk
(``page_cache``)."""
