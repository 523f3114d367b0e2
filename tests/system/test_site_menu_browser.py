"""The site's menu and icon in a real browser (Debian's Chromium) against the real server: every
page's menu leads to the documentation's index and on to its pages, and the icon the pages link
is one the browser draws (issue 48)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

# The gallery, a page of the docs, and a page the docs do not have (its 404 is a page of the site)
PAGES = ["/", "/docs/engines.md", "/docs/nothing"]
# The icon a page links, and /favicon.ico (asked for by pages that link none), as the browser
# loads them: their width once drawn, 0 if it could not.
ICON_WIDTHS = """async () => {
    const drawn = (src) => new Promise((resolve) => {
        const image = new Image();
        image.onload = () => resolve(image.naturalWidth);
        image.onerror = () => resolve(0);
        image.src = src;
    });
    const linked = document.querySelector("link[rel=icon]").href;
    return [new URL(linked).pathname, await drawn(linked), await drawn("/favicon.ico")];
}"""


@pytest.mark.parametrize("path", PAGES)
def test_every_pages_menu_leads_to_the_docs(asgi_server: str, page, path: str) -> None:
    # given a page of the site
    page.goto(f"{asgi_server}{path}")

    # when the menu's Docs is followed
    page.click("header nav >> text=Docs")
    page.wait_for_url(f"{asgi_server}/docs/")

    # then the index lists every page, and Docs is the menu's current place
    assert page.text_content("article h1") == "Documentation"
    links = page.locator("article li a")
    assert links.count() == len(list((ROOT / "docs").glob("*.md")))
    assert page.get_attribute("header nav >> text=Docs", "aria-current") == "page"
    # and a page of it opens rendered
    page.click("article li a >> text=Segmentation engines")
    page.wait_for_url(f"{asgi_server}/docs/engines.md")
    assert page.text_content("article h1") == "Segmentation engines"


def test_the_pages_icon_is_drawn(asgi_server: str, page) -> None:
    page.goto(f"{asgi_server}/")

    assert page.evaluate(ICON_WIDTHS) == ["/favicon.svg", 32, 32]
