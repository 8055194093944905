"""The task sets bundled with moa-chat, for trying `moa-chat eval`, not for claiming results."""
