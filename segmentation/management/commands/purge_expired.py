"""``manage.py purge_expired``: delete expired cookie sessions, the work kept for them, and the
deletion IDs that expired with them (those that own nothing); `make prepare` runs it, and a
deployment runs it daily."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from segmentation.services.consent import expired_records_purge


class Command(BaseCommand):
    help = (
        "Delete expired sessions, the work kept for them, and the deletion IDs of expired "
        "sessions that own nothing."
    )

    def handle(self, *args: object, **options: object) -> None:
        purged = expired_records_purge()
        self.stdout.write(
            f"deleted {purged.sessions} expired session(s), {purged.works} work(s) kept for "
            f"them and {purged.deletion_ids} deletion ID(s) that owned nothing"
        )
