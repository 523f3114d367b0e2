"""The form of a schedule entry, for the admin API (its JSON, given as the form's data) and the
Django admin alike: Django's forms parse the times, check the lengths and choices, and the
model's ``clean()`` the rules between fields."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.utils import timezone

from channels_admin.models import Channel, ScheduleEntry
from channels_admin.schedule_times import WEEKDAYS
from channels_admin.selectors import schedule_zone

FIELDS = (
    "name",
    "channel_id",
    "enabled",
    "kind",
    "at",
    "until",
    "time_of_day",
    "until_time",
    "weekdays",
    "then_return",
    "programme_title",
    "missed",
)


class ScheduleEntryForm(forms.ModelForm):
    weekdays = forms.TypedMultipleChoiceField(
        choices=list(enumerate(WEEKDAYS)),
        coerce=int,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Weekly entry: the days.",
    )

    class Meta:
        model = ScheduleEntry
        fields = FIELDS

    def clean_channel_id(self) -> str:
        channel_id = self.cleaned_data["channel_id"]
        if not Channel.objects.of_default_playlist().filter(channel_id=channel_id).exists():
            raise forms.ValidationError("No channel of the playlist has this ID.")
        return channel_id

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        # The other kind's fields mean nothing: kept empty, so that the entry says one thing.
        if data.get("kind") == ScheduleEntry.Kind.ONCE:
            data.update(time_of_day=None, until_time=None, weekdays=[])
            self._at_check(data.get("at"))
        elif data.get("kind") == ScheduleEntry.Kind.WEEKLY:
            data.update(at=None, until=None)
        return data

    def _at_check(self, at: dt.datetime | None) -> None:
        """A one-off time that has passed is refused: the runner counts only the times after an
        entry was saved, so it would never come. An entry whose time stays as it was (a past
        entry renamed, or disabled) is left alone: its time was judged when it was set."""
        if at is None:
            return
        entry = self.instance
        unchanged = entry.pk is not None and entry.kind == ScheduleEntry.Kind.ONCE
        if unchanged and entry.at == at:
            return
        now = timezone.now()
        if at > now:
            return
        zone = schedule_zone()
        self.add_error(
            "at",
            f"{at.astimezone(zone):%Y-%m-%d %H:%M:%S} has passed (now "
            f"{now.astimezone(zone):%Y-%m-%d %H:%M:%S}, {zone.key}): a one-off entry must "
            "be in the future",
        )

    def error_text(self) -> str:
        """The first of the form's errors, as ``field: message`` (the entry's own bare): one
        reason at a time, as the rules between fields are judged on wrong fields too."""
        field, messages = next(iter(self.errors.items()))
        return messages[0] if field == "__all__" else f"{field}: {messages[0]}"
