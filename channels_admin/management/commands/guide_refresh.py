"""``manage.py guide_refresh``: the admin API's guide refresh, from the command line."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from channels_admin.errors import GuideRefreshBusy, GuideRefreshError
from channels_admin.services.guide import guide_refresh


class Command(BaseCommand):
    help = (
        "Refresh the programme guide (XMLTV) from CHANNELS_GUIDE_URL and the playlist's "
        "url-tvg; if it fails, the last good guide stays."
    )

    def handle(self, *args: object, **options: object) -> None:
        try:
            result = guide_refresh()
        except (GuideRefreshError, GuideRefreshBusy) as error:
            raise CommandError(error.text) from None
        self.stdout.write(
            f"guide refreshed: {result.channels} channels, {result.programmes} programmes"
            + (f", {result.left_out} left out (over the bounds)" if result.left_out else "")
        )
