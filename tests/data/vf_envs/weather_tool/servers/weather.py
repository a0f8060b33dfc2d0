"""The ``get_weather`` tool, an MCP server verifiers starts with ``python -m`` for each rollout."""

from __future__ import annotations

import verifiers.v1 as vf

FORECASTS: dict[str, str] = {"Paris": "sunny, 21 C", "Oslo": "snowy, -3 C"}


class WeatherToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = None  # advertised as `get_weather`, the name the test checkpoint calls

    @vf.tool
    def get_weather(self, city: str) -> str:
        """Weather in a city."""
        return FORECASTS.get(city.strip().title(), "no forecast for that city")


if __name__ == "__main__":
    WeatherToolset.run()
