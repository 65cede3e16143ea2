// A minimal VS Code client for the gsr language server: it starts `gsr lsp` over stdio
// for .gsr files and restarts it on request or when its settings change.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function makeClient() {
  const config = vscode.workspace.getConfiguration("gsr");
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  const command = (config.get("server.path") || "gsr").replace(
    "${workspaceFolder}", folder ? folder.uri.fsPath : "");
  const serverOptions = {
    command,
    args: ["lsp", ...config.get("server.args", [])],
    transport: TransportKind.stdio, // the client adds `--stdio`, which `gsr lsp` accepts
  };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "gsr" },
      { scheme: "untitled", language: "gsr" },
    ],
    initializationOptions: { debounceMs: config.get("debounceMs", 150) },
    // capabilities.general.positionEncodings is offered by the client library; gsr accepts utf-16/8/32
  };
  return new LanguageClient("gsr", "gsr language server", serverOptions, clientOptions);
}

async function start() {
  client = makeClient();
  try {
    await client.start();
  } catch (err) {
    vscode.window.showErrorMessage(
      `Could not start the gsr language server (${err.message}). ` +
        "Install gsrlang (`pip install gsrlang`) or set `gsr.server.path`.");
  }
}

async function restart() {
  if (client) {
    await client.stop().catch(() => undefined);
  }
  await start();
}

function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("gsr.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("gsr.server") || event.affectsConfiguration("gsr.debounceMs")) {
        restart();
      }
    }),
  );
  return start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
