"""The working directory tools are confined to: paths that resolve outside it are refused."""

from __future__ import annotations

from pathlib import Path

from .registry import ToolError


class Workspace:
    def __init__(self, root: Path | str, *, environment: dict[str, str] | None = None) -> None:
        self.root = Path(root).resolve()
        # What commands started here see: the process's environment without its secrets (tools.environment).
        self.environment = environment

    def resolve(self, raw: str) -> Path:
        """An absolute path inside the workspace, symlinks followed; anything that escapes is refused."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("a path is required")
        candidate = Path(raw.strip()).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()  # follows symlinks, so a link pointing outside is caught too
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError(
                f"refused: {raw!r} resolves to {resolved}, outside the working directory {self.root}; "
                "tools may only touch files inside it"
            )
        return resolved

    def relative(self, path: Path) -> str:
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return str(rel) if str(rel) != "." else "."
