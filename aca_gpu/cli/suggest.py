"""A mistyped command name gets the nearest real ones, as a mistyped flag already does.

Click suggests close names from a group's `commands`; the top-level group loads its commands on
demand (`LazyGroup`), so that dictionary is empty and `acagpu stauts` said only "No such command
'stauts'.". The suggestions come from the command table instead.
"""

from __future__ import annotations

import difflib

import click


class SuggestingGroup(click.Group):
    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            if not name or name.startswith("-") or self.get_command(ctx, name) is not None:
                raise
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.7)
            if not close:
                raise
            said = " or ".join(repr(c) for c in close)
            raise click.UsageError(f"{exc.message} Did you mean {said}?", ctx) from None
