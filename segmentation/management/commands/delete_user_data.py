"""``manage.py delete_user_data ID``: delete the uploads and records of a client."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from segmentation.services.consent import user_data_delete


class Command(BaseCommand):
    help = "Delete the videos, annotations and records linked to a deletion ID's client."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("deletion_id")

    def handle(self, *args: object, **options: object) -> None:
        try:
            deleted = user_data_delete(deletion_id=options["deletion_id"])
        except LookupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"deleted {deleted.videos} video(s) and {deleted.annotations} annotation file(s)"
        )
