"""The lake's Data Docs index view, named by module and class in the site's configuration
(`pielake.pipeline.gx_project.SITE`); GX imports it when it renders the site."""

from __future__ import annotations

from pathlib import Path

from great_expectations.render.view import DefaultJinjaIndexPageView
from jinja2 import ChoiceLoader, FileSystemLoader

TEMPLATES = Path(__file__).parent


class IndexView(DefaultJinjaIndexPageView):
    """GX's index page view, finding pielake's templates (this folder's `*.j2`) before GX's own of the same name.
    GX's `custom_data_docs/views` folder cannot do this: it is searched after GX's templates, for new names only."""

    def __init__(self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None):
        super().__init__(custom_styles_directory, custom_views_directory)
        self.env.loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), self.env.loader])
