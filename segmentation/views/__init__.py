"""The annotator's pages, and the HTTP endpoints beside GraphQL, a module each: the pages
(``pages.py``), the library's files (``media.py``), the mask exports (``exports.py``), the
annotation import (``annotation_import.py``), what answers a session and its receipt
(``session_info.py``) and the propagation stream (``stream.py``). They share one error response
(``responses.py``), the charge to the client's cost limit (``cost_charges.py``) and the handling
of a posted annotation file (``annotation_posts.py``). ``segmentation/urls.py`` routes to them.
"""
