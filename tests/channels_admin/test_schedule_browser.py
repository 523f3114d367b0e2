"""The admin page's schedule panel in Chromium against the real server: an entry added is
listed among the next switches, and a one-off entry a few seconds ahead switches the channel,
which the page shows with the switch it made; one whose time has passed is refused with the
reason."""

from __future__ import annotations

import datetime as dt
import re

from tests.channels_admin.test_pages_browser import admin_login, server  # noqa: F401 (fixture)


def next_days(count: int) -> list[str]:
    """The next ``count`` Mondays and Fridays with 20:00 UTC still to come, as the page
    writes them ("Fri 27 Nov,")."""
    now, found = dt.datetime.now(dt.UTC), []
    day = now.date()
    while len(found) < count:
        at = dt.datetime.combine(day, dt.time(20), tzinfo=dt.UTC)
        if day.weekday() in (0, 4) and at > now:
            found.append(f"{at:%a} {at.day} {at:%b},")
        day += dt.timedelta(days=1)
    return found


def test_an_entry_added_on_the_admin_page_is_listed_and_switches(server, page):  # noqa: F811
    admin_login(server, page)

    # a weekly entry: listed with its next switches
    page.fill("#entry-name", "Film night")
    page.fill("#entry-channel", "demo.2")
    page.fill("#entry-time", "20:00:00")
    page.check("#entry-days input[value='0']")
    page.check("#entry-days input[value='4']")
    page.click("#entry-save")
    page.wait_for_selector("#schedule-entries tr")

    assert page.text_content("#schedule-message") == "Entry added."
    row = page.locator("#schedule-entries tr").first
    assert row.locator("td").nth(0).text_content() == "Film night"
    assert row.locator("td").nth(1).text_content() == "Test pattern 2"
    assert row.locator("td").nth(2).text_content() == "Mon, Fri 20:00:00"
    upcoming = page.locator("#schedule-upcoming li").all_text_contents()
    assert upcoming == [f"{day} 20:00:00 · Test pattern 2 (Film night)" for day in next_days(10)]

    # a one-off entry whose time has passed: refused, the page saying why
    page.fill("#entry-name", "Soon")
    page.fill("#entry-channel", "demo.1")
    page.select_option("#entry-kind", "once")
    page.fill("#entry-at", "2020-01-02T20:00:00")
    page.click("#entry-save")
    page.wait_for_selector("#schedule-message.error")
    refusal = page.text_content("#schedule-message")
    assert re.fullmatch(
        r"at: 2020-01-02 20:00:00 has passed \(now [\d-]+ [\d:]+, UTC\): a one-off entry must "
        r"be in the future",
        refusal,
    ), refusal
    assert page.locator("#schedule-entries tr").count() == 1

    # a one-off entry four seconds ahead (the schedule's zone is UTC here): it switches
    at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%S")
    page.fill("#entry-at", at)
    page.click("#entry-save")
    page.wait_for_function("() => document.querySelectorAll('#schedule-entries tr').length === 2")
    page.wait_for_function(
        "() => document.getElementById('channel-name').textContent === 'Test pattern 1'",
        timeout=15_000,
    )
    runs = "() => document.getElementById('schedule-runs').textContent"
    page.wait_for_function(f"{runs}.includes('Soon start: switched')", timeout=10_000)
    page.shot("scheduled")

    assert page.locator("#schedule-runs li").count() == 1
