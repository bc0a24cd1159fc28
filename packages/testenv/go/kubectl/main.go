// kubectl for tests that apply the shipped manifests as an operator does (`kubectl apply -k`): the real command
// tree from k8s.io/kubectl, wired as kubernetes' own cmd/kubectl wires it, kustomize included.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
