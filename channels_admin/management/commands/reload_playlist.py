"""``manage.py reload_playlist``: the admin API's reload, from the command line."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from channels_admin.errors import PlaylistReloadError
from channels_admin.services.playlists import playlist_reload


class Command(BaseCommand):
    help = "Reload the channel playlist from its file or URL; nothing changes if it fails."

    def handle(self, *args: object, **options: object) -> None:
        try:
            result = playlist_reload()
        except PlaylistReloadError as error:
            raise CommandError(f"failed to reload playlist: {error}") from None
        self.stdout.write(f"reloaded: {result.channels} channels, version {result.version}")
