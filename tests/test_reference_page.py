"""The API reference at /schema: rendered on the server, readable without JavaScript or internet."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser

import pytest

from admin_api.reference_page import render_reference_page
from tests.harness import assistant_model, http_client, service

pytestmark = pytest.mark.anyio


class PageReading(HTMLParser):
    """What a reader sees: the text of each operation's section, keyed by its heading
    ("POST /apps"), every element id, every link target and the tags used."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.operations: dict[str, str] = {}
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.sources: list[str] = []
        self.tags: set[str] = set()
        self.text = ""
        self._hidden = False
        self._heading: list[str] | None = None
        self._section: list[str] | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        self._hidden = tag in ("title", "style")
        if found.get("id"):
            self.ids.add(found["id"] or "")
        if tag == "a" and found.get("href") is not None:
            self.links.append(found["href"] or "")
        self.sources.extend(v or "" for k, v in attrs if k in ("src", "srcset", "action"))
        if tag == "section" and found.get("class") == "op":
            self._section, self._heading = [], []
        elif tag == "h3" and self._section is not None:
            self._heading = []
        elif tag in ("td", "th", "p", "div", "summary"):
            self._text(" ")

    def handle_endtag(self, tag: str) -> None:
        self._hidden = False
        if tag == "h3" and self._section is not None and self._heading is not None:
            heading = " ".join("".join(self._heading).split())
            self._heading = None
            self._section.insert(0, heading + "\n")
        elif tag == "section" and self._section is not None:
            heading, body = "".join(self._section).split("\n", 1)
            self.operations[heading] = " ".join(body.split())
            self._section = None
        elif tag in ("h1", "h2", "h3", "h4", "li"):
            self._text(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._text(data)

    def _text(self, data: str) -> None:
        self.text += data
        if self._heading is not None:
            self._heading.append(data)
        elif self._section is not None:
            self._section.append(data)


@pytest.fixture
async def client(tmp_path) -> AsyncIterator:
    async with service(tmp_path / "mnemoloop.db", assistant_model()) as services:
        async with http_client(services, "admin-secret") as client:
            yield client


async def reference_page(client) -> str:
    response = await client.get("/schema")  # no Authorization header
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


async def test_schema_page_is_plain_html_that_loads_nothing_from_elsewhere(client):
    page = await reference_page(client)
    reading = PageReading(page)
    assert "<script" not in page.lower()
    assert not reading.tags & {"script", "link", "iframe", "img", "object", "embed"}
    assert reading.sources == []
    assert "url(" not in page and "@import" not in page
    assert not [href for href in reading.links if re.match(r"(https?:)?//", href)]
    assert "/schema/openapi.json" in reading.links


async def test_schema_page_lists_every_operation_of_the_openapi_document(client):
    document = (await client.get("/schema/openapi.json")).json()
    reading = PageReading(await reference_page(client))
    expected = {f"{method.upper()} {path}" for path, item in document["paths"].items()
                for method in item}
    assert {"POST /apps", "GET /apps/{app_id}/memories", "GET /health"} <= expected
    assert expected == set(reading.operations)


async def test_schema_page_opens_with_the_title_version_and_the_json_link(client):
    top = " ".join(PageReading(await reference_page(client)).text.split())
    assert top.startswith("mnemoloop 0.1.0 Per-app memories that maintain themselves")
    assert "The OpenAPI 3.1.0 document: /schema/openapi.json" in top


async def test_schema_page_links_lead_to_places_on_the_page(client):
    reading = PageReading(await reference_page(client))
    anchors = {href[1:] for href in reading.links if href.startswith("#")}
    assert "schema-InstallApp" in anchors
    assert anchors <= reading.ids


async def test_memories_search_parameter_shows_its_constraints(client):
    memories = PageReading(await reference_page(client)).operations["GET /apps/{app_id}/memories"]
    assert "q query string or null no words to search for" in memories
    assert "min length: 1" in memories and "max length: 500" in memories
    assert r"pattern: [^\W_]" in memories
    assert "limit query integer no with q minimum: 1; maximum: 1000; default: 20" in memories
    assert "Auth: bearer token (Authorization: Bearer <token>)" in memories
    assert "memories array of MemoryOut yes" in memories


async def test_install_shows_its_body_fields_responses_and_auth(client):
    install = PageReading(await reference_page(client)).operations["POST /apps"]
    assert "Request body (required) application/json: InstallApp" in install
    assert "appId string yes letters, digits" in install
    assert "name string yes no control characters, not blank max length: 200" in install
    assert "201 Document created" in install and "apiKey string yes" in install
    assert "401 No bearer token" in install and "detail string yes" in install
    assert "Auth: bearer token" in install


async def test_health_needs_no_token_on_the_page_either(client):
    health = PageReading(await reference_page(client)).operations["GET /health"]
    assert "Auth: none" in health and "status string yes" in health


async def test_openapi_json_stays_open_and_json(client):
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    assert "json" in response.headers["content-type"]
    assert {"/apps", "/apps/{app_id}/memories", "/health"} <= set(response.json()["paths"])


async def test_guarded_routes_still_need_a_token(client):
    assert (await client.get("/apps")).status_code == 401


HAND_WRITTEN = {
    "openapi": "3.1.0",
    "info": {"title": "Pets <script>alert(1)</script>", "version": "1.2.3"},
    "paths": {
        "/pets/{pet_id}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "put": {
                "tags": ["pets"],
                "summary": "Replace a pet",
                "description": "Beware <script>alert('x')</script> & friends",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
                "responses": {
                    "200": {
                        "description": "The pet as stored",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    },
                    "404": {"description": "No such pet"},
                },
                "security": [{"token": []}],
            },
        }
    },
    "components": {
        "parameters": {
            "PetId": {"name": "pet_id", "in": "path", "required": True,
                      "schema": {"type": "integer", "minimum": 1}},
        },
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["petName", "owner"],
                "properties": {
                    "petName": {"type": "string", "maxLength": 40},
                    "owner": {
                        "type": "object",
                        "required": ["ownerId"],
                        "properties": {
                            "ownerId": {"type": "string", "description": "<b>who</b> owns it"},
                            "since": {"type": "string", "format": "date"},
                        },
                    },
                    "collar": {"$ref": "#/components/schemas/Collar"},
                },
            },
            "Collar": {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
            },
        },
        "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    },
}


def test_renderer_resolves_refs_and_shows_nested_fields():
    page = render_reference_page(HAND_WRITTEN, "/schema/openapi.json")
    reading = PageReading(page)
    put = reading.operations["PUT /pets/{pet_id}"]
    assert "pet_id path integer yes minimum: 1" in put
    assert "Request body (required) application/json: Pet" in put
    assert "petName string yes max length: 40" in put
    assert "owner object yes" in put
    assert "ownerId string yes <b>who</b> owns it" in put
    assert "since string (date) no" in put
    assert "collar Collar no" in put
    assert "404 No such pet" in put
    assert "Auth: bearer token" in put
    assert "schema-Collar" in reading.ids and "#schema-Collar" in reading.links
    assert 'colour string no one of: "red", "blue"' in " ".join(reading.text.split())


def test_renderer_escapes_text_from_the_document():
    page = render_reference_page(HAND_WRITTEN, "/schema/openapi.json")
    reading = PageReading(page)
    assert "<script" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; friends" in page
    put = reading.operations["PUT /pets/{pet_id}"]
    assert "Beware <script>alert('x')</script> & friends" in put


async def test_the_root_leads_to_the_console(client) -> None:
    response = await client.get("/")
    assert response.status_code in (301, 302, 307, 308)
    assert response.headers["location"] == "/console"
