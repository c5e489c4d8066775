// Runs @cloud-copilot/iam-simulate on every simulation read from stdin, a
// JSON array of {id, simulation} (the library's Simulation shape), and
// writes a JSON array of {id, decision, errors, statements}: decision is
// Allowed, ExplicitlyDenied or ImplicitlyDenied (or Error), and statements
// name the ones that decided it, so a failing test can say why. CommonJS,
// so that NODE_PATH finds the library in .tools/iamsim/node_modules.
'use strict'
const { runSimulation } = require('@cloud-copilot/iam-simulate')

// name is a statement's effect, policy and Sid (or position).
function name(s) {
  return `${s.explain.effect} ${s.policyId ? s.policyId + '/' : ''}${s.explain.identifier}`
}

// decisive says, for the identity and the resource policies each, what
// they decided and by which statements: those that matched, by policy and
// Sid, with their effect; with none, those that matched the action and
// resource but not the principal or condition (why an expected grant did
// not apply).
function decisive(analysis) {
  const out = []
  for (const [where, a] of [['identity', analysis?.identityAnalysis], ['resource', analysis?.resourceAnalysis]]) {
    if (!a) continue
    let why = [...(a.denyStatements || []), ...(a.allowStatements || [])].map(name)
    if (!why.length) {
      why = (a.unmatchedStatements || [])
        .filter((s) => s.actionMatch && s.resourceMatch)
        .map((s) => `${name(s)} did not apply (principal ${s.principalMatch}, condition ${s.conditionMatch})`)
    }
    out.push(`${where} policies ${a.result}: ${why.length ? why.join(', ') : 'no statement matches the action and resource'}`)
  }
  return out
}

async function main() {
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  const results = []
  for (const { id, simulation } of JSON.parse(input)) {
    const r = await runSimulation(simulation, {})
    if (r.resultType === 'error') {
      results.push({ id, decision: 'Error', errors: JSON.stringify(r.errors) })
      continue
    }
    const analyses = r.resultType === 'single' ? [r.result.analysis] : r.results.map((x) => x.analysis)
    results.push({ id, decision: r.overallResult, statements: analyses.flatMap(decisive) })
  }
  process.stdout.write(JSON.stringify(results))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
